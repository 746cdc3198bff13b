"""Signature keys: what a compiled function's cache is keyed on.

The key of a call holds the argument structure, dtypes, ranks, which axes have size 1,
the values of Python ``int``/``bool``/``str`` arguments and of those named in
``static_argnums``. Sizes are not part of it: the generated code reads them from the
arrays, so one compile serves every batch size. A function that reads a size while
tracing (``x.shape[0]``) is keyed on exact sizes instead, so a graph never reuses a
stale one.

Python scalars: a ``float`` argument is a run-time input (a new value does not
recompile: a learning rate in a schedule), a float64 scalar typed weakly as NumPy types
the number itself (``trace.Trace.weak``): where it meets a float32 tensor it is cast to
float32 first, so ``x * lr`` stays float32 and equals the eager tape's result; the
gradient of one has the dtype of the function's value. A ``complex`` argument is a
run-time input too, a complex128 typed weakly (complex64 beside float32 or complex64
values, as NumPy's ``0j``); its gradient is complex. ``int``, ``bool`` and ``str``
arguments are part of the signature (they may feed ``range``, shapes and axes), and so
are the arguments named in ``static_argnums`` (hashable values; a float there is a
constant of the graph). More than ``config.recompile_warning`` traces of one function
warn once, naming what changed between the last two signatures (``_signature_change``).
"""

import numpy as np

from .. import config, tree
from ..errors import JittapeError, UnsupportedError, at_user_line
from ..tensor import Tensor, Variable
from ..trace import Tracer, TracerError

_ndarray = np.ndarray
_STATIC = (bool, int, float, str)


class ArgnumsError(JittapeError, ValueError, TypeError):
    """``argnums`` that do not name distinct arguments of a call (out of range, or one
    argument twice once negative positions are resolved). A ValueError as in the rest of
    jittape, and a TypeError as a call with too few arguments is in Python and JAX."""


def options(mode, argnums, static_argnums):
    """(single, argnums, static_argnums) of a compiled function's options, checked:
    ``single`` when ``argnums`` is one int (the gradient is not a tuple); a ``function``
    differentiates nothing."""
    single = isinstance(argnums, int)
    resolved = (argnums,) if single else tuple(argnums)
    if not all(isinstance(a, int) for a in resolved) or not resolved:
        raise TypeError(at_user_line(f"{mode}: argnums must be an int or a non-empty tuple of ints, "
                        f"got {argnums!r}"))
    if len(set(resolved)) != len(resolved):
        raise ValueError(at_user_line(f"{mode}: argnums={argnums!r} names an argument twice"))
    if mode == "function":
        resolved = ()                     # nothing is differentiated
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    if not all(isinstance(a, int) for a in static):
        raise TypeError(at_user_line(f"{mode}: static_argnums must be an int or a tuple of ints, "
                        f"got {static_argnums!r}"))
    return single, resolved, static


class Signatures:
    """The part of ``compiled.Compiled`` that turns a call's arguments into its signature
    key and flattened leaves. It reads the compiled function's ``mode``, ``name``,
    ``argnums``, ``single``, ``static_argnums``, ``target``, ``_size_keyed`` and the
    positions resolved per argument count (``_resolved``)."""

    def _key(self, args):
        """(signature key, flattened leaves)."""
        leaves, treedefs, kinds = [], [], []
        parts = []
        diff = self._diff(len(args)) if self.argnums else ()
        static = self._static(len(args)) if self.static_argnums else ()
        for i, a in enumerate(args):
            if i in static:               # a constant of the graph: part of the signature
                try:
                    hash(a)
                except TypeError:
                    raise TypeError(at_user_line(
                        f"{self.mode}({self.name}): argument {i} is in static_argnums but a "
                        f"{type(a).__name__} is not hashable; pass a tuple (or a Python "
                        "number), or make it a run-time argument")) from None
                leaves.append(a)
                treedefs.append(None)
                kinds.append("static")
                parts.append(("static", type(a).__name__, a))
                continue
            if a.__class__ is np.ndarray:
                if not a.dtype.isnative:            # Numba reads native byte order only
                    a = a.astype(a.dtype.newbyteorder("="))
                leaves.append(a)
                treedefs.append(None)
                kinds.append("array")
                parts.append((a.dtype.char, tuple(d == 1 for d in a.shape)) if not self._size_keyed
                             else (a.dtype.char, a.shape))
                continue
            sub, td = tree.flatten(a)
            treedefs.append(None if td.kind == "leaf" else td)
            for leaf in sub:
                kind, part = self._leaf(leaf, i)
                if kind == "array" and isinstance(leaf, Tensor):
                    leaf = leaf._value
                elif kind == "array" and leaf.__class__ is not _ndarray:
                    leaf = np.asarray(leaf)
                leaves.append(leaf)
                kinds.append(kind)
                parts.append(part)
        return (tuple(treedefs), tuple(kinds), tuple(parts), config._check_numerics,
                config._parallel, config._roll_loops), leaves

    def _leaf(self, leaf, argnum):
        if not isinstance(leaf, (Tensor, np.ndarray, np.generic)) and _is_device_array(leaf):
            if self.target != "cuda":
                raise UnsupportedError(at_user_line(
                    f"{self.mode}({self.name}): argument {argnum} is a GPU array; compile "
                    "with target='cuda', or copy it to the host"))
            shape = tuple(leaf.shape)
            return "device", (np.dtype(leaf.dtype).char, shape if self._size_keyed
                              else tuple(d == 1 for d in shape))
        if isinstance(leaf, Variable):
            return "variable", ("V", leaf.dtype.char, leaf.shape)
        value = leaf._value if isinstance(leaf, Tensor) else leaf
        if isinstance(value, np.ndarray):
            return "array", (value.dtype.char, value.shape if self._size_keyed
                             else tuple(d == 1 for d in value.shape))
        if isinstance(value, np.generic):
            return "scalar", (value.dtype.char, ())
        if value.__class__ is float:          # a run-time input (a learning rate)
            return "pyfloat", ("f", ())
        if value.__class__ is complex:        # a run-time input too, weak as a Python float
            return "pycomplex", ("D", ())
        if isinstance(value, _STATIC):
            return "static", (type(value).__name__, value)
        if isinstance(value, Tracer):
            raise TracerError(at_user_line(
                f"{self.mode}({self.name}): argument {argnum} is a traced value of a function "
                "that is no longer being traced; do not keep traced values"))
        if hasattr(value, "__array__") and not isinstance(leaf, Tracer):
            return "array", self._leaf(np.asarray(value), argnum)[1]
        raise UnsupportedError(at_user_line(
            f"{self.mode}({self.name}): argument {argnum} holds a value of type "
            f"{type(leaf).__name__}; arguments must be NumPy arrays or scalars, Python "
            "numbers, jittape tensors, or lists/tuples/dicts of them"))

    def _check_dtype(self, dtype, argnum):
        if dtype.kind == "c" and self.target == "cuda":
            raise UnsupportedError(at_user_line(
                f"{self.mode}({self.name}): argument {argnum} has dtype {dtype.name}: complex "
                "values are not supported with target='cuda' yet; compile for the CPU, or pass "
                "the real and imaginary parts as two real arrays"))
        if dtype.kind not in "biufc":
            raise UnsupportedError(at_user_line(
                f"{self.mode}({self.name}): argument {argnum} has dtype {dtype}; compiled "
                "functions take boolean, integer, floating-point and complex values"))
        if dtype == np.float16:
            raise UnsupportedError(at_user_line(
                f"{self.mode}({self.name}): argument {argnum} has dtype float16, which Numba "
                "cannot compile; cast it to float32 (or use the eager tape)"))
        if not dtype.isnative:
            raise UnsupportedError(at_user_line(
                f"{self.mode}({self.name}): argument {argnum} has non-native byte order "
                f"{dtype.str}; convert it with .astype({dtype.name!r})"))

    def _argnums_text(self):
        return str(self.argnums[0]) if self.single else str(self.argnums)

    def _diff(self, n):
        """The differentiated argument positions for a call with ``n`` positional
        arguments, in the order given (a negative argnum counts from the end, as in JAX)."""
        diff = self._resolved.get(n)
        if diff is None:
            diff = tuple(i + n if i < 0 else i for i in self.argnums)
            bad = [i for i, j in zip(self.argnums, diff) if not 0 <= j < n]
            if bad:
                raise ArgnumsError(at_user_line(
                    f"{self.mode}({self.name}): argnums={self._argnums_text()} is out of range "
                    f"for a call with {n} positional argument{'s' * (n != 1)} (argnum {bad[0]})"))
            if len(set(diff)) != len(diff):
                raise ArgnumsError(at_user_line(
                    f"{self.mode}({self.name}): argnums={self._argnums_text()} names one "
                    f"argument twice for a call with {n} positional argument{'s' * (n != 1)} "
                    f"(resolved: {diff})"))
            self._resolved[n] = diff
        return diff

    def _static(self, n):
        """The positions of ``static_argnums`` for a call with ``n`` positional arguments."""
        static = self._resolved.get(("static", n))
        if static is None:
            static = frozenset(i + n if i < 0 else i for i in self.static_argnums)
            if any(not 0 <= i < n for i in static):
                raise ValueError(at_user_line(
                    f"{self.mode}({self.name}): static_argnums={self.static_argnums} is out of "
                    f"range for a call with {n} positional argument{'s' * (n != 1)}"))
            both = static & set(self._diff(n) if self.argnums else ())
            if both:
                raise ValueError(at_user_line(
                    f"{self.mode}({self.name}): argument {min(both)} is in both argnums and "
                    "static_argnums; a constant cannot be differentiated"))
            self._resolved[("static", n)] = static
        return static

    def _grad_structure(self, key):
        """Per differentiated argument: (its treedef or None for a bare array, leaf count)."""
        out = []
        treedefs, kinds = key[0], key[1]
        counts = [1 if td is None else td.num_leaves for td in treedefs]
        for i in self._diff(len(treedefs)):
            n_inputs = sum(1 for j in range(sum(counts[:i]), sum(counts[:i + 1]))
                           if kinds[j] != "static")
            out.append((treedefs[i], n_inputs))
        return out


def _is_device_array(x):
    """A GPU array (``__cuda_array_interface__``, or the CUDA simulator's arrays)."""
    return hasattr(x, "__cuda_array_interface__") or type(x).__name__ == "FakeCUDAArray"


def _signature_change(old, new, sizes):
    """What differs between two signature keys, in words (``sizes``: the variant was
    traced for sizes the others could not serve)."""
    if old is None:
        return "the signature was new"
    if sizes:
        return ("the variants traced before could not serve the sizes of the arguments "
                "(a size computed from them was 1 when they were traced, or the code was "
                "generated for the sizes seen)")
    if old == new:
        return ("a Python branch on a traced value (a guard) went the other way for the "
                "same signature")
    if old[0] != new[0] or len(old[2]) != len(new[2]):
        return "the arguments' structure changed (their number, nesting or leaves)"
    counts = [1 if td is None else td.num_leaves for td in new[0]]
    argnum = [i for i, n in enumerate(counts) for _ in range(n)]
    changes = []
    for k, (ka, kb, a, b) in enumerate(zip(old[1], new[1], old[2], new[2])):
        if ka == kb and a == b:
            continue
        where = f"argument {argnum[k]}" + (f" (leaf {k})" if counts[argnum[k]] > 1 else "")
        if ka != kb:
            changes.append(f"{where} changed kind: {_part_text(ka, a)} -> {_part_text(kb, b)}")
            continue
        if ka == "static":
            changes.append(f"{where} is a static value: {a[-1]!r} -> {b[-1]!r}")
            continue
        da, db = a[ka == "variable"], b[ka == "variable"]       # (a Variable's: "V", dtype)
        if da != db:
            changes.append(f"{where} changed dtype: {np.dtype(da).name} -> {np.dtype(db).name}")
        if len(a[-1]) != len(b[-1]):
            changes.append(f"{where} changed rank: {len(a[-1])} -> {len(b[-1])}")
        elif a[-1] == b[-1]:
            continue
        elif all(x.__class__ is bool for x in a[-1] + b[-1]):
            axes = [j for j, (x, y) in enumerate(zip(a[-1], b[-1])) if x != y]
            changes.append(f"{where} has a size-1 dimension where it had none or the reverse "
                           f"(axis {', '.join(map(str, axes))})")
        else:
            changes.append(f"{where} changed size: {a[-1]} -> {b[-1]} (the function is keyed on "
                           "exact sizes: it reads a size while tracing, x.shape or len(x), or "
                           "a size computed from its arguments' sizes was 1)")
    if old[3:6] != new[3:6]:
        changes.append("jt.config.check_numerics, parallel or roll_loops changed")
    if old[6:] != new[6:]:
        changes.append("a value read from outside the arguments changed (a guard)")
    return "; ".join(changes) or "the signature changed"


def _part_text(kind, part):
    if kind == "static":
        return f"the static value {part[-1]!r}"
    if kind == "pyfloat":
        return "a Python float"
    if kind == "pycomplex":
        return "a Python complex"
    if kind == "variable":
        return f"a Variable of dtype {np.dtype(part[1]).name}"
    name = np.dtype(part[0]).name
    return f"{name} of rank {len(part[-1])}" if kind in ("array", "device") else f"a {name} scalar"


def _default_key(values):
    """Default values as part of a key: Python numbers, strings and None by value,
    anything else by identity."""
    out = []
    for v in values:
        if v.__class__ is float:
            out.append((float, v.hex()))             # -0.0 and 0.0 bake different constants
        elif v is None or v.__class__ in (bool, int, str):
            out.append((v.__class__, v))
        else:
            out.append(("id", id(v)))
    return tuple(out)
