"""Tensor, Variable, constant, the dtype rules and the NumPy protocol hooks.

A ``Tensor`` is an immutable array value. A ``Variable`` is a tensor whose value can
be replaced with ``assign``; it keeps one identity across assignments, which is what
tapes watch. Python floats become float32 and Python ints int32 (as in TensorFlow);
NumPy arrays keep their dtype; operations follow NumPy broadcasting and promotion,
where a Python scalar never widens a tensor's dtype.
"""

import ast
import itertools
import sys
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from . import config as _config
from .recording import (ACTIVE_TAPES as _ACTIVE_TAPES, TRACES as _TRACES,
                        current_trace as _current_trace, thread_tapes as _thread_tapes)
from .errors import (warn_at_user, GradientLostError, GradientLostWarning, TracerError, UnsupportedError, at_user_line,
                     call_text, caller_frames)

float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
bool_ = np.dtype(np.bool_)

# Filled by the op modules: NumPy ufunc / function -> jittape op.
UFUNC_TABLE = {}
FUNCTION_TABLE = {}

_float64 = float64
_ids = itertools.count(1)
_INT32_MIN, _INT32_MAX = -2**31, 2**31 - 1


def as_dtype(dtype):
    """A NumPy dtype from a dtype-like (``jt.float32``, ``np.float64``, ``'int32'``, ...)."""
    return None if dtype is None else np.dtype(dtype)


def _default_dtype(array, source):
    """TensorFlow's defaults for values built from Python data: float32, int32."""
    if array.dtype == np.float64 and not _holds_numpy(source, np.float64):
        return float32
    if array.dtype == np.int64 and not _holds_numpy(source, np.int64):
        if array.size == 0 or (_INT32_MIN <= array.min() and array.max() <= _INT32_MAX):
            return int32
    return array.dtype


def _holds_numpy(source, dtype):
    """Whether Python data contains NumPy values of ``dtype`` (which then keep it)."""
    if isinstance(source, (np.ndarray, np.generic)):
        return source.dtype == dtype
    if isinstance(source, (list, tuple)):
        return any(_holds_numpy(s, dtype) for s in source)
    return False


def to_array(value, dtype=None, what="jt.constant"):
    """Convert a Python number, nested list, NumPy array or tensor to a NumPy value.

    ``what`` names the operation in errors (a complex value given a real dtype is
    rejected: the cast would drop its imaginary part)."""
    dtype = as_dtype(dtype)
    if isinstance(value, Tensor):
        array = value._value
    elif isinstance(value, (np.ndarray, np.generic)):
        array = value
    elif isinstance(value, (list, tuple)):
        if any(isinstance(v, Tensor) for v in value):
            # a list of tensors given to an op or jt.constant loses their gradients (jt.stack
            # keeps them); a variable's value is cut from the tape on purpose, as in TensorFlow
            if _ACTIVE_TAPES and not what.startswith(("jt.Variable", "Variable.")):
                for v in value:
                    if isinstance(v, Tensor):
                        _check_conversion(v)
            value = [to_array(v, what=what) for v in value]
        array = np.asarray(value)
        if dtype is None:
            array = array.astype(_default_dtype(array, value), copy=False)
    elif isinstance(value, (bool, int, float, complex)):
        array = np.asarray(value)
        if dtype is None:
            array = array.astype(_default_dtype(array, value), copy=False)
    else:
        array = np.asarray(value)
        if array.dtype == object:
            raise UnsupportedError(at_user_line(
                f"{what}: cannot convert a value of type {type(value).__name__} to a jittape "
                "tensor"))
    # checked before a cast to a real dtype, which would drop the imaginary part
    if array.dtype.kind == "c" and dtype is not None and dtype.kind != "c":
        raise UnsupportedError(at_user_line(
            f"{what}: a complex value (dtype {array.dtype.name}) cannot become dtype "
            f"{dtype.name}: the imaginary part would be dropped; take jt.real or jt.abs of it"))
    if dtype is not None and array.dtype != dtype:
        array = array.astype(dtype)
    if isinstance(array, np.ndarray) and array.ndim == 0:
        array = array[()]          # 0-d values are kept as NumPy scalars
    return array


def complex_error(what, dtype):
    """The error for a complex value reaching ``what`` (an op or a function that does not
    take complex values)."""
    return UnsupportedError(at_user_line(
        f"{what}: complex values are not supported by {what} (got dtype "
        f"{np.dtype(dtype).name}); docs/api.md, 'Complex numbers', lists the ops that take "
        "them"))


class OperandHoldsTensors(Exception):
    """Raised by ``coerce_operand`` for a list or tuple that holds tensors: the op applies
    itself again to their stack (``ops.core.pack``), which keeps their gradients."""


def holds_tensor(value):
    """Whether a list or tuple holds a tensor, at any depth."""
    return any(isinstance(v, Tensor) or (v.__class__ in (list, tuple) and holds_tensor(v))
               for v in value)


def coerce_operand(value, op):
    """An op operand that is not a Tensor: Python scalars stay weak, arrays keep dtypes."""
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (np.ndarray, np.generic, complex)):
        return value                        # (a Python complex stays weak, as a float)
    if isinstance(value, (list, tuple)):
        if holds_tensor(value):
            raise OperandHoldsTensors(op)
        return to_array(value, what=op)
    if hasattr(value, "__array__") or hasattr(value, "__array_interface__"):
        return np.asarray(value)
    raise UnsupportedError(at_user_line(
        f"{op}: unsupported operand of type {type(value).__name__}"))


def _numpy_text(value, is_repr):
    text = repr(value) if is_repr else str(value)
    if "\n" in text:
        text = "\n" + text
    return text


class Tensor:
    """An immutable array value that ops, tapes and tracers understand."""

    __slots__ = ("_value", "_id", "__weakref__")
    __array_priority__ = 100

    if TYPE_CHECKING:    # what ops/methods.py sets on the class, for type checkers
        def __add__(self, other: Any) -> "Tensor": ...
        def __radd__(self, other: Any) -> "Tensor": ...
        def __sub__(self, other: Any) -> "Tensor": ...
        def __rsub__(self, other: Any) -> "Tensor": ...
        def __mul__(self, other: Any) -> "Tensor": ...
        def __rmul__(self, other: Any) -> "Tensor": ...
        def __truediv__(self, other: Any) -> "Tensor": ...
        def __rtruediv__(self, other: Any) -> "Tensor": ...
        def __floordiv__(self, other: Any) -> "Tensor": ...
        def __rfloordiv__(self, other: Any) -> "Tensor": ...
        def __mod__(self, other: Any) -> "Tensor": ...
        def __rmod__(self, other: Any) -> "Tensor": ...
        def __pow__(self, other: Any) -> "Tensor": ...
        def __rpow__(self, other: Any) -> "Tensor": ...
        def __matmul__(self, other: Any) -> "Tensor": ...
        def __rmatmul__(self, other: Any) -> "Tensor": ...
        def __neg__(self) -> "Tensor": ...
        def __pos__(self) -> "Tensor": ...
        def __abs__(self) -> "Tensor": ...
        def __eq__(self, other: Any) -> "Tensor": ...  # type: ignore[override]
        def __ne__(self, other: Any) -> "Tensor": ...  # type: ignore[override]
        def __lt__(self, other: Any) -> "Tensor": ...
        def __le__(self, other: Any) -> "Tensor": ...
        def __gt__(self, other: Any) -> "Tensor": ...
        def __ge__(self, other: Any) -> "Tensor": ...
        def __and__(self, other: Any) -> "Tensor": ...
        def __or__(self, other: Any) -> "Tensor": ...
        def __invert__(self) -> "Tensor": ...
        def __getitem__(self, index: Any) -> "Tensor": ...
        def reshape(self, *shape: Any) -> "Tensor": ...
        def transpose(self, *axes: Any) -> "Tensor": ...
        def sum(self, axis: Any = None, keepdims: Any = False) -> "Tensor": ...
        def mean(self, axis: Any = None, keepdims: Any = False) -> "Tensor": ...
        def max(self, axis: Any = None, keepdims: Any = False) -> "Tensor": ...
        def min(self, axis: Any = None, keepdims: Any = False) -> "Tensor": ...
        def prod(self, axis: Any = None, keepdims: Any = False) -> "Tensor": ...
        def dot(self, other: Any) -> "Tensor": ...
        def clip(self, min: Any = None, max: Any = None) -> "Tensor": ...
        def squeeze(self, axis: Any = None) -> "Tensor": ...
        def ravel(self) -> "Tensor": ...
        def flatten(self) -> "Tensor": ...
        def astype(self, dtype: Any) -> "Tensor": ...
        @property
        def T(self) -> "Tensor": ...

    def __init__(self, value: Any, dtype: Any = None) -> None:
        self._value = to_array(value, dtype, "jt.Variable" if isinstance(self, Variable)
                               else "jt.constant")
        self._id = next(_ids)

    @classmethod
    def _wrap(cls, value):
        """Wrap a NumPy result without conversion (the ops' fast path)."""
        t = object.__new__(Tensor)
        if type(value) is np.ndarray and value.ndim == 0:
            value = value[()]
        t._value = value
        t._id = next(_ids)
        return t

    # -- array attributes -------------------------------------------------
    @property
    def shape(self):
        return self._value.shape

    @property
    def dtype(self):
        return self._value.dtype

    @property
    def ndim(self):
        return self._value.ndim

    @property
    def size(self):
        return self._value.size

    def numpy(self):
        """The value as a NumPy array (a NumPy scalar for 0-d tensors)."""
        v = self._value
        return v.copy() if isinstance(v, np.ndarray) else v

    def __array__(self, dtype=None, copy=None):
        # an implicit conversion (np.asarray, ndarray.dot, SciPy, ...): the tape cannot
        # follow it; jittape's own code reads ._value and never comes here
        if _ACTIVE_TAPES:
            for tape in _ACTIVE_TAPES:          # any thread's: _check_conversion sorts them
                if self._id in tape._watched or self.__class__ is Variable:
                    _check_conversion(self)
                    break
        array = np.asarray(self._value)
        if dtype is not None and array.dtype != dtype:
            return array.astype(dtype)
        return array.copy() if copy else array

    def __len__(self):
        if self.ndim == 0:
            raise TypeError(at_user_line("len() of a 0-d tensor"))
        return self._value.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError(at_user_line("iteration over a 0-d tensor"))
        return (self[i] for i in range(self._value.shape[0]))

    def _scalar(self, kind):
        if self._value.size != 1:
            raise ValueError(at_user_line(
                f"{kind}() of a tensor of shape {self.shape} is ambiguous: only size-1 "
                "tensors convert to Python scalars"))
        return np.asarray(self._value).reshape(()).item()

    def __bool__(self):
        return bool(self._scalar("bool"))

    def __float__(self):
        return float(self._scalar("float"))

    def __int__(self):
        return int(self._scalar("int"))

    def __index__(self):
        if self.dtype.kind not in "iu":
            raise TypeError(at_user_line(f"only integer tensors can be used as an index, not {self.dtype}"))
        return int(self._scalar("int"))

    __hash__ = None   # == is elementwise, as in NumPy and TensorFlow

    # -- printing (TensorFlow's layout) ------------------------------------
    def __str__(self):
        return (f"jt.Tensor({_numpy_text(self._value, False)}, "
                f"shape={self.shape}, dtype={self.dtype.name})")

    def __repr__(self):
        return (f"<jt.Tensor: shape={self.shape}, dtype={self.dtype.name}, "
                f"numpy={_repr_value(self._value)}>")

    # -- NumPy protocols ----------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        op = UFUNC_TABLE.get(ufunc)
        if method != "__call__" or op is None or kwargs.get("out") is not None:
            name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
            raise UnsupportedError(at_user_line(
                f"{_ufunc_home(ufunc)}.{name} is not supported on jittape tensors; use the "
                "jittape ops (jittape.numpy) or convert explicitly with .numpy(), which drops "
                "the gradient"))
        kwargs.pop("out", None)
        return op(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        op = FUNCTION_TABLE.get(func)
        if op is None:
            raise UnsupportedError(at_user_line(
                f"{_qualified(func)} is not supported on jittape tensors; use the jittape "
                "ops (jittape.numpy) or convert explicitly with .numpy(), which drops the "
                "gradient"))
        return op(*args, **kwargs)


def _qualified(func):
    """``numpy.linalg.svd`` for ``np.linalg.svd`` (NumPy's public module path)."""
    module = getattr(func, "__module__", None) or "numpy"
    return f"{module}.{func.__name__}"


def _repr_value(value):
    if np.ndim(value) == 0:
        return str(value)
    return _numpy_text(np.asarray(value), True)


class Variable(Tensor):
    """A mutable tensor. Trainable variables are watched by tapes when accessed."""

    __slots__ = ("_name", "_trainable")

    def __init__(self, value: Any, trainable: bool = True, name: Optional[str] = None,
                 dtype: Any = None) -> None:
        if isinstance(value, Tensor) and _TRACES and _current_trace() is not None:
            value = _concrete_initial_value(value)
        if isinstance(value, Variable):
            value = value._value
        super().__init__(value, dtype)
        self._trainable = bool(trainable)
        self._name = f"{name if name is not None else 'Variable'}:0"

    @property
    def name(self):
        return self._name

    @property
    def trainable(self):
        return self._trainable

    def numpy(self):
        if _TRACES and _current_trace() is not None:
            _traced_read(self, "numpy()")
        return super().numpy()

    def _new_value(self, value, op):
        trace = _current_trace() if _TRACES else None
        if trace is not None:
            return trace.assign_variable(self, value, op)
        new = to_array(value, self.dtype, f"Variable.{op}")
        if np.shape(new) != self.shape:
            raise ValueError(at_user_line(
                f"{op}: cannot assign a value of shape {np.shape(new)} to variable "
                f"{self._name!r} of shape {self.shape}"))
        if isinstance(new, np.ndarray) and (new is self._value or not new.flags.owndata
                                            or isinstance(value, np.ndarray)):
            new = new.copy()
        self._value = new
        return self

    def assign(self, value):
        return self._new_value(value, "assign")

    def __repr__(self):
        return (f"<jt.Variable {self._name!r} shape={self.shape} dtype={self.dtype.name}, "
                f"numpy={_repr_value(self._value)}>")


def _check_conversion(tensor):
    """An implicit conversion of ``tensor`` to NumPy: if a tape recording in this thread
    watches it, or a value it depends on (or would watch it when read: a trainable
    variable), the gradient through it is lost. Warn once per call site, or raise with
    ``jt.config.strict``."""
    if tensor._value.dtype.kind not in "fc":       # no gradient to lose
        return
    for tape in _thread_tapes():
        if tensor._id in tape._watched or (
                tensor.__class__ is Variable and tensor._trainable and tape._watch_accessed):
            break
    else:
        return
    global _last_conversion
    frame, library = caller_frames(sys._getframe(1))
    # NumPy may ask a tensor for its array more than once in one call (ndarray.dot,
    # np.vectorize): one conversion, one warning, whatever the warning filters
    seen = (id(frame), frame.f_lasti if frame is not None else -1, tensor._id)
    if seen == _last_conversion and not _config.strict:
        return
    _last_conversion = seen
    text = call_text(frame) if frame is not None else None
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else None
    what = (f"variable {tensor._name!r}" if isinstance(tensor, Variable)
            else f"a tensor of shape {tensor.shape}")
    by = f"`{text}`" if text else "an implicit conversion"
    if library is not None:
        module = library.f_globals.get("__name__", "?")
        by += f" (in {module}.{getattr(library.f_code, 'co_qualname', library.f_code.co_name)})"
    message = (f"{by} converts {what} to a NumPy array while a GradientTape records it "
               "(it is watched, or computed from a watched value): the tape cannot follow "
               f"NumPy, so the gradient through it is lost. {_advice(text, library)}; call "
               ".numpy() to drop the gradient on purpose")
    if where is not None:
        message += f" (at {where})"
    if _config.strict:
        raise GradientLostError(message + " [jt.config.strict is on]")
    warn_at_user(message, GradientLostWarning, frame)


_last_conversion = None
_ARRAY_BUILDERS = frozenset(["array", "asarray", "asanyarray", "ascontiguousarray",
                             "asfortranarray", "constant", "stack", "vstack", "hstack",
                             "column_stack", "concatenate"])


def _advice(text, library=None):
    """What to write instead of the call ``text`` (the user's source), from its shape
    and from the library whose frame (``library``) converted the tensor."""
    fallback = ("Write it with jittape ops, which the tape records (jt.dot(X, w) or X @ w "
                "for products, jt.stack for a list of tensors, jittape.numpy for NumPy's "
                "functions)")
    try:
        node = ast.parse(text, mode="eval").body if text else None
    except SyntaxError:
        node = None
    module = library.f_globals.get("__name__", "") if library is not None else ""
    if module == "scipy.stats" or module.startswith("scipy.stats."):
        # (read from the modules imported, not imported here: jittape.scipy sits above)
        names = getattr(sys.modules.get("jittape.scipy.stats"), "__all__", ())
        func = node.func if isinstance(node, ast.Call) else None
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
                and func.value.attr in names):
            return (f"Write jt.scipy.stats.{func.value.attr}.{func.attr}(...), which the "
                    "tape records")
        return ("Use jittape.scipy.stats, which the tape records"
                + (f" ({', '.join(names)})" if names else "")
                + "; for another distribution write its density with jittape ops")
    if not isinstance(node, ast.Call):
        return fallback
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else (
        func.id if isinstance(func, ast.Name) else None)
    if name == "dot" and isinstance(func, ast.Attribute) and len(node.args) == 1:
        a = ast.get_source_segment(text, func.value)
        b = ast.get_source_segment(text, node.args[0])
        return f"Write jt.dot({a}, {b}) or {a} @ {b}"
    if name in _ARRAY_BUILDERS:
        if node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
            return (f"Write jt.stack({ast.get_source_segment(text, node.args[0])}) to make "
                    "one tensor of several")
        return "Keep the tensor: jittape ops and NumPy's functions on it are recorded"
    op = getattr(sys.modules.get("jittape"), name, None) if name else None
    if callable(op) and not isinstance(op, type) and not name.startswith("_"):
        return f"Write jt.{name}(...), which the tape records"
    return fallback


def _concrete_initial_value(value):
    """A Variable made while a function is traced: its initial value must be known now
    (the variable is made once, when the function is traced, as in tf.function)."""
    if value._value is None:
        raise UnsupportedError(at_user_line(
            "jt.Variable: the initial value is a traced value of the function being "
            "compiled; create variables outside the compiled function (or from NumPy "
            "values) and assign to them inside it"))
    return value._value


def _traced_read(variable, what):
    raise TracerError(at_user_line(
        f"{what} of variable {variable.name!r} in a traced function: its value is only "
        "known when the compiled function runs; compute with it through jittape ops"))


def constant(value: Any, dtype: Any = None) -> Tensor:
    """A Tensor from a Python number, a nested list, a NumPy array or a tensor."""
    return Tensor(value, dtype)


def is_tensor(x):
    return isinstance(x, Tensor)


def _ufunc_home(ufunc):
    """Where a ufunc lives, as the user calls it: ``numpy``, or ``scipy.special`` (whose
    functions are ufuncs too)."""
    if getattr(np, ufunc.__name__, None) is ufunc:
        return "numpy"
    special = sys.modules.get("scipy.special")
    if special is not None and getattr(special, ufunc.__name__, None) is ufunc:
        return "scipy.special"
    return "numpy"
