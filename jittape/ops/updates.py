"""Functional updates, as JAX's: ``x.at[idx].set(v)``, ``.add(v)``, ``.multiply(v)``,
``.divide(v)``, ``.power(v)``, ``.min(v)``, ``.max(v)``, ``.get()``: a new tensor, ``x``
unchanged, differentiable in ``x`` and ``v``, eager and compiled.

Written with the indexing ops (``getitem``, and ``index_add``, which scatters into
zeros), so they need no lowering of their own. ``add`` accumulates where an index
repeats, as ``np.add.at`` and JAX do. The others follow NumPy's ``x[idx] op= v``: each
selected element is updated once, from its value before the update, and where an index
repeats the last value given for it is the one stored. That is exact when the index
arrays' values are known (eager code, or arrays the compiled function holds as
constants); with index arrays that are arguments of a compiled function, a repeated
index stores the mean of the values given for it (the same where they agree, as with a
scalar ``v``).
"""

import numpy as np

from ..tensor import Tensor
from . import elementwise as ew
from .creation import ones_like
from .indexing import _index_add, getitem, getitem_prim, parse_index, set_row
from .shape import _shape, broadcast_to


class _At:
    """``x.at``: ``x.at[idx]`` names the elements an update applies to."""

    __slots__ = ("_x",)

    def __init__(self, x):
        self._x = x

    def __getitem__(self, index):
        return _Update(self._x, index)

    def __repr__(self):
        return f"<updates of {self._x!r}>"


class _Update:
    __slots__ = ("_x", "_index")

    def __init__(self, x, index):
        self._x, self._index = x, index

    def get(self):
        """``x[idx]``."""
        return getitem(self._x, self._index)

    def add(self, v):
        """``x`` with ``v`` added at ``idx`` (accumulated where an index repeats)."""
        x = self._x
        spec, arrays = parse_index(self._index)
        row = _one_row(x, spec, arrays)
        if row is not None:                      # one index: no repeats to accumulate
            return self.set(ew.add(self.get(), v))
        v = _values(x, getitem_prim.bind(x, *arrays, index=spec), v)
        return ew.add(x, _index_add.bind(v, *arrays, index=spec, shape=_shape(x)))

    def set(self, v):
        """``x`` with ``v`` stored at ``idx``."""
        x = self._x
        spec, arrays = parse_index(self._index)
        selected = getitem_prim.bind(x, *arrays, index=spec)
        v = _values(x, selected, v)
        row = _one_row(x, spec, arrays)
        if row is not None:                      # one row written, not every element
            return set_row.bind(x, v, row)
        scatter = lambda values: _index_add.bind(values, *arrays, index=spec,   # noqa: E731
                                                 shape=_shape(x))
        count = scatter(ones_like(v))
        chosen = ew.greater(count, 0)
        last = _last_occurrences(x, spec, arrays)
        if last is not None:                     # index values known: the last one stored
            return ew.where(chosen, scatter(v if last.all() else ew.multiply(v, last)), x)
        # index arrays known only at run time: a repeated index takes the mean
        return ew.where(chosen, ew.divide(scatter(v), ew.maximum(count, 1)), x)

    def multiply(self, v):
        """``x`` with the elements at ``idx`` multiplied by ``v`` (``x[idx] *= v``)."""
        return self.set(ew.multiply(self.get(), v))

    mul = multiply

    def divide(self, v):
        """``x[idx] /= v``."""
        return self.set(ew.divide(self.get(), v))

    def power(self, v):
        """``x[idx] **= v``."""
        return self.set(ew.power(self.get(), v))

    def min(self, v):
        """``x`` with the elements at ``idx`` replaced by their minimum with ``v``."""
        return self.set(ew.minimum(self.get(), v))

    def max(self, v):
        """``x`` with the elements at ``idx`` replaced by their maximum with ``v``."""
        return self.set(ew.maximum(self.get(), v))


def _one_row(x, spec, arrays):
    """The index of the row ``idx`` selects where it is one integer (a traced scalar, or
    a Python int) along the first axis: ``set_row``'s case. Else None."""
    if spec == (("array", 0),) and len(arrays) == 1:
        a = arrays[0]
        if tuple(_shape(a)) == () and np.dtype(a.dtype).kind in "iu":
            return a
        return None
    if len(spec) == 1 and spec[0][0] == "int" and isinstance(spec[0][1], (int, np.integer)) \
            and not hasattr(spec[0][1], "expr"):       # (a traced size would be frozen)
        return np.asarray(spec[0][1], np.int64)
    return None


def _values(x, selected, v):
    """``v`` as the selected elements' values: in ``x``'s dtype (as NumPy's assignment
    casts), broadcast to their shape."""
    v = v if isinstance(v, Tensor) else np.asarray(v)
    if v.dtype != x.dtype:
        v = ew.cast(v, x.dtype)
    return broadcast_to(v, _shape(selected))


def _last_occurrences(x, spec, arrays):
    """A 0/1 array over the selected elements, 1 where an element's index is its last
    occurrence (NumPy's assignment keeps the last value given), or None where the index
    arrays' values are not known (traced arguments). All ones without repeats."""
    from ..trace import Tracer
    from .indexing import build_index
    if not arrays:                 # slices and ints select each element once
        return np.ones((), x.dtype)
    values = []
    for a in arrays:
        value = a._value if isinstance(a, Tensor) else a
        if value is None:
            return None
        values.append(np.asarray(value))
    if isinstance(x, Tracer):      # (the positions are this size's: the trace holds for it)
        x._trace.reads_sizes = True
    positions = np.arange(int(np.prod([int(d) for d in _shape(x)], dtype=np.int64))).reshape(
        tuple(int(d) for d in _shape(x)))[build_index(spec, values)]
    flat = np.ravel(positions)
    keep = np.zeros(flat.size, x.dtype)
    _, last = np.unique(flat[::-1], return_index=True)
    keep[flat.size - 1 - last] = 1
    return keep.reshape(np.shape(positions))


def _at(self):
    """``x.at[idx].set(v)`` and the other functional updates (``jittape.ops.updates``)."""
    return _At(self)


Tensor.at = property(_at)        # type: ignore[attr-defined]
